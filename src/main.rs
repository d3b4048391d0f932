//! The `tavern` command line.

fn main() {}
