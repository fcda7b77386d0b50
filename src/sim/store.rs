//! In-memory storage. (Stub: owned by the core work.)
