//! The verbs. (Stub: owned by the core work.)
