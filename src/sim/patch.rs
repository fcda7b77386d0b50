//! Merge patch, JSON patch, strategic merge patch and server-side apply.
//! (Interface stub: owned by the patch work.)
