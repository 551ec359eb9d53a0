//! Support shared by the workspace's examples and integration tests: starting
//! real, private `redis-server` processes on free loopback ports, and both
//! backends side by side.
//!
//! Nothing here is published; it exists so tests never touch a Redis they did
//! not start.

pub mod exactness;
pub mod log_capture;
pub mod redis_cluster;
pub mod redis_server;
pub mod stores;
