//! Fault injection. (Stub: owned by the core work.)
