//! The request path. (Being written.)

pub mod classify;
