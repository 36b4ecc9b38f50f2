//! weft-storage
