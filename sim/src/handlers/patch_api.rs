//! The patch engine's interface as the handlers use it (`sim::patch`).

pub use crate::patch::{
    apply_subresource, json_patch, merge_patch, record_update_subresource, strategic_merge_patch, PatchError,
};
