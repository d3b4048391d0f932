//! Script hosts: sandboxed Lua (mlua, Lua 5.4) and Rhai, their limits, value conversion and
//! the `api` surface scripts see.
