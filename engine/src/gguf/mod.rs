//! GGUF reader (being written).
