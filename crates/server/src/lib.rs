//! The sojourn web server (`sojourn-engine serve`) and the kernel priority bands
//! it uses (`sojourn-engine bands`).

pub mod bands;
pub mod cli;
