//! The simulator's server. (Stub: owned by the core work.)

/// Configuration of a simulated cluster.
#[derive(Debug, Clone, Default)]
pub struct SimConfig {}

/// A running simulated cluster.
#[derive(Debug)]
pub struct Sim {}

/// One request as the simulator received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {}
