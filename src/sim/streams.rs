//! pods/log, exec, attach and port-forward. (Interface stub.)
