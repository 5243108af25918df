//! Picard MarkDuplicates on coordinate-sorted input (to be written).
