//! Validation. (Stub: owned by the core work.)
