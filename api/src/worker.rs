//! The Worker's side of MWP §11 as pure functions and shapes (DESIGN §13): the Agent Card and
//! Presence (`card`), admission control on an offer (`admission`, OFR-7…9) and the global
//! Scheduler (`scheduler`, SCH-4…10). `weft worker` (the binary's `worker` module) does the
//! I/O around them; the server stores cards and Presence.

pub mod admission;
pub mod card;
pub mod scheduler;
