//! samblaster 0.1.26 duplicate marking on query-grouped input (to be written).
