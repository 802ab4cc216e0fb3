//! The on-Redis protocol, in one place: lock names and the keys derived from them
//! ([`name`], [`template`]), the Lua scripts and what they answer ([`scripts`]), and the
//! holder record ([`holder`]).

pub(crate) mod holder;
pub(crate) mod name;
pub(crate) mod scripts;
pub(crate) mod template;
