//! Trace readers. Each turns one input format into a [`crate::trace::Trace`]; every bad row
//! is an error naming the file and the line.

pub mod native;
pub mod openb;
pub mod philly;
pub mod table;
pub mod tiresias;

pub use table::parse_timestamp;
