//! Resolution of stored edge targets (module specs) to indexed paths. (Being written.)
