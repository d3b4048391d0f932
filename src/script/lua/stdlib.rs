//! The sandboxed standard library: removals, guarded replacements and `print`.

use std::sync::Arc;

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value as LuaValue, Variadic};

use super::patterns::{is_plain, start_index, Capture, Matcher, PatternError};
use super::{abort_error, ctx_log, error_value_fn, guarded, Shared, ERROR_MT_KEY};

/// Runs with the raw functions as upvalues; the script never sees them.
const PRELUDE: &str = r#"
local rust = ...
local G = _G
G.load, G.loadfile, G.dofile, G.require, G.collectgarbage = nil, nil, nil, nil, nil
string.dump = nil
local check = rust.check
local native_pcall, native_xpcall = pcall, xpcall
local co_resume, co_close = coroutine.resume, coroutine.close
local type, error_value = type, rust.error_value
-- Once the budget is gone, the error must not be caught: re-raise after every catch. An
-- error a Rust function raised is handed over as its `{code, message}` table.
local function pass(ok, ...)
  check()
  if ok then return ok, ... end
  local e = ...
  if type(e) == "userdata" then return ok, error_value(e) end
  return ok, ...
end
G.pcall = function(f, ...) return pass(native_pcall(f, ...)) end
local aborted = rust.aborted
-- An error thrown by the budget hook reaches the message handler while Lua still has hooks
-- switched off, so the handler must not run once the budget is gone.
G.xpcall = function(f, h, ...)
  return pass(native_xpcall(f, function(e)
    if aborted() then return e end
    if type(e) == "userdata" then e = error_value(e) end
    return h(e)
  end, ...))
end
coroutine.resume = function(co, ...) return pass(co_resume(co, ...)) end
coroutine.close = function(co) return pass(co_close(co)) end
local raw_setmetatable, rawget, error = setmetatable, rawget, error
G.setmetatable = function(t, mt)
  if type(mt) == "table" and (rawget(mt, "__gc") ~= nil or rawget(mt, "__close") ~= nil) then
    error("setmetatable: __gc and __close metamethods are not allowed in tavern scripts", 2)
  end
  return raw_setmetatable(t, mt)
end
local smt = getmetatable("")
smt.__metatable = "string"
string.rep = rust.rep
string.find = rust.find
string.match = rust.match
local raw_gmatch = rust.gmatch
string.gmatch = function(s, p, init)
  local it, st = raw_gmatch(s, p, init)
  return function() return it(st) end
end
string.gsub = rust.gsub
G.print = rust.print
-- The metatable of the error tables `error_value` makes: they print as `code: message`.
local tostring = tostring
return {
  __tostring = function(e) return tostring(rawget(e, "code")) .. ": " .. tostring(rawget(e, "message")) end,
  __metatable = "tavern.error",
}
"#;

fn pattern_error(e: PatternError, sh: &Shared) -> mlua::Error {
    match e {
        PatternError::Malformed(m) => mlua::Error::runtime(m),
        PatternError::Budget => abort_error(
            sh.budget
                .aborted()
                .unwrap_or(crate::script::budget::Abort::Instructions),
        ),
    }
}

fn push_capture(lua: &Lua, src: &[u8], c: Capture, out: &mut Vec<LuaValue>) -> mlua::Result<()> {
    out.push(match c {
        Capture::Str(a, b) => LuaValue::String(lua.create_string(&src[a..b])?),
        Capture::Pos(n) => LuaValue::Integer(n as i64),
    });
    Ok(())
}

fn charge_fn(sh: &Shared) -> impl FnMut(u64) -> bool + '_ {
    move |n| sh.budget.charge(n).is_ok()
}

fn find_aux(
    lua: &Lua,
    sh: &Shared,
    s: LuaString,
    p: LuaString,
    init: Option<i64>,
    plain: bool,
    find: bool,
) -> mlua::Result<MultiValue> {
    let src = s.as_bytes();
    let pat = p.as_bytes();
    let init = start_index(init.unwrap_or(1), src.len());
    if init > src.len() {
        return Ok(MultiValue::from_vec(vec![LuaValue::Nil]));
    }
    if find && (plain || is_plain(&pat)) {
        // Plain search: linear with memchr, no budget needed beyond the hook.
        let hay = &src[init..];
        let pos = if pat.is_empty() {
            Some(0)
        } else {
            memchr::memmem::find(hay, &pat)
        };
        return Ok(match pos {
            Some(i) => MultiValue::from_vec(vec![
                LuaValue::Integer((init + i + 1) as i64),
                LuaValue::Integer((init + i + pat.len()) as i64),
            ]),
            None => MultiValue::from_vec(vec![LuaValue::Nil]),
        });
    }
    let mut m = Matcher::new(&src, &pat, charge_fn(sh));
    let found = m.find(init).map_err(|e| pattern_error(e, sh))?;
    let mut out = Vec::new();
    if let Some((a, b)) = found {
        let caps = m.captures(a, b).map_err(|e| pattern_error(e, sh))?;
        if find {
            out.push(LuaValue::Integer(a as i64 + 1));
            out.push(LuaValue::Integer(b as i64));
            // `find` returns captures only when the pattern has some.
            if m.captures(a, b).map(|c| c.len()).unwrap_or(0) > 0 && has_captures(&pat) {
                for c in caps {
                    push_capture(lua, &src, c, &mut out)?;
                }
            }
        } else {
            for c in caps {
                push_capture(lua, &src, c, &mut out)?;
            }
        }
    } else {
        out.push(LuaValue::Nil);
    }
    m.flush().map_err(|e| pattern_error(e, sh))?;
    Ok(MultiValue::from_vec(out))
}

/// Whether the pattern contains a capture (an unescaped `(`).
fn has_captures(pat: &[u8]) -> bool {
    let mut i = 0;
    while i < pat.len() {
        match pat[i] {
            b'%' => i += 2,
            b'(' => return true,
            _ => i += 1,
        }
    }
    false
}

fn gsub(
    lua: &Lua,
    sh: &Shared,
    (s, p, repl, max_n): (LuaString, LuaString, LuaValue, Option<i64>),
) -> mlua::Result<(LuaString, i64)> {
    let src = s.as_bytes().to_vec();
    let pat = p.as_bytes().to_vec();
    match &repl {
        LuaValue::String(_)
        | LuaValue::Integer(_)
        | LuaValue::Number(_)
        | LuaValue::Table(_)
        | LuaValue::Function(_) => {}
        other => {
            return Err(mlua::Error::runtime(format!(
                "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                other.type_name()
            )))
        }
    }
    let repl_bytes: Option<Vec<u8>> = match &repl {
        LuaValue::String(r) => Some(r.as_bytes().to_vec()),
        LuaValue::Integer(i) => Some(i.to_string().into_bytes()),
        LuaValue::Number(f) => Some(f.to_string().into_bytes()),
        _ => None,
    };
    let max_n = max_n.unwrap_or(i64::MAX);
    let anchor = pat.first() == Some(&b'^');
    let p0 = usize::from(anchor);
    let max_bytes = sh.limits.max_string_bytes;
    let mut out: Vec<u8> = Vec::with_capacity(src.len());
    let mut pos = 0usize;
    let mut last: Option<usize> = None;
    let mut n = 0i64;
    let mut m = Matcher::new(&src, &pat, charge_fn(sh));
    while n < max_n {
        let e = m.match_at(pos, p0).map_err(|e| pattern_error(e, sh))?;
        match e {
            Some(e) if Some(e) != last => {
                n += 1;
                let caps = m.captures(pos, e).map_err(|e| pattern_error(e, sh))?;
                let whole = &src[pos..e];
                match (&repl_bytes, &repl) {
                    (Some(r), _) => {
                        let mut i = 0;
                        while i < r.len() {
                            let c = r[i];
                            if c != b'%' {
                                out.push(c);
                                i += 1;
                                continue;
                            }
                            i += 1;
                            let d = r.get(i).copied().unwrap_or(0);
                            i += 1;
                            if d == b'%' {
                                out.push(b'%');
                            } else if d == b'0' {
                                out.extend_from_slice(whole);
                            } else if d.is_ascii_digit() {
                                let idx = (d - b'1') as usize;
                                let c = m
                                    .get_capture(idx, pos, e)
                                    .map_err(|e| pattern_error(e, sh))?;
                                match c {
                                    Capture::Str(a, b) => out.extend_from_slice(&src[a..b]),
                                    Capture::Pos(p) => {
                                        out.extend_from_slice(p.to_string().as_bytes())
                                    }
                                }
                            } else {
                                return Err(mlua::Error::runtime(
                                    "invalid use of '%' in replacement string",
                                ));
                            }
                        }
                    }
                    (None, LuaValue::Function(f)) => {
                        let mut args = Vec::new();
                        for c in caps {
                            push_capture(lua, &src, c, &mut args)?;
                        }
                        let v: LuaValue = f.call(MultiValue::from_vec(args))?;
                        add_value(&mut out, whole, v)?;
                    }
                    (None, LuaValue::Table(t)) => {
                        let mut args = Vec::new();
                        push_capture(lua, &src, caps[0], &mut args)?;
                        let key = args.pop().unwrap_or(LuaValue::Nil);
                        let v: LuaValue = t.get(key)?;
                        add_value(&mut out, whole, v)?;
                    }
                    _ => {}
                }
                pos = e;
                last = Some(e);
            }
            _ => {
                if pos < src.len() {
                    out.push(src[pos]);
                    pos += 1;
                } else {
                    break;
                }
            }
        }
        if out.len() > max_bytes {
            return Err(string_too_large(max_bytes));
        }
        if anchor {
            break;
        }
    }
    m.flush().map_err(|e| pattern_error(e, sh))?;
    if pos < src.len() {
        out.extend_from_slice(&src[pos..]);
    }
    if out.len() > max_bytes {
        return Err(string_too_large(max_bytes));
    }
    Ok((lua.create_string(&out)?, n))
}

fn add_value(out: &mut Vec<u8>, whole: &[u8], v: LuaValue) -> mlua::Result<()> {
    match v {
        LuaValue::Nil | LuaValue::Boolean(false) => out.extend_from_slice(whole),
        LuaValue::String(s) => out.extend_from_slice(&s.as_bytes()),
        LuaValue::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        LuaValue::Number(f) => out.extend_from_slice(f.to_string().as_bytes()),
        other => {
            return Err(mlua::Error::runtime(format!(
                "invalid replacement value (a {})",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn string_too_large(max: usize) -> mlua::Error {
    super::script_error(crate::script::ScriptError::ValueLimit {
        what: "string_size".into(),
        message: format!("a string would be larger than {max} bytes"),
    })
}

/// Installs the sandboxed library into a fresh state.
/// Returns the `ctx.log` function.
pub(crate) fn install(lua: &Lua, sh: &Arc<Shared>) -> mlua::Result<Function> {
    let rust = lua.create_table()?;
    rust.raw_set(
        "check",
        guarded(lua, sh, "pcall", |_lua, sh, ()| match sh.budget.aborted() {
            Some(a) => Err(abort_error(a)),
            None => Ok(()),
        })?,
    )?;
    rust.raw_set(
        "aborted",
        guarded(lua, sh, "xpcall", |_lua, sh, ()| {
            Ok(sh.budget.aborted().is_some())
        })?,
    )?;
    rust.raw_set(
        "rep",
        guarded(
            lua,
            sh,
            "string.rep",
            |lua, sh, (s, n, sep): (LuaString, i64, Option<LuaString>)| {
                if n <= 0 {
                    return lua.create_string("");
                }
                let s = s.as_bytes();
                let sep = sep
                    .as_ref()
                    .map(|x| x.as_bytes().to_vec())
                    .unwrap_or_default();
                let n = n as u128;
                let total = (s.len() as u128) * n + (sep.len() as u128) * (n - 1);
                let max = sh.limits.max_string_bytes;
                if total > max as u128 {
                    return Err(string_too_large(max));
                }
                // Charge the copy so huge-but-allowed repetitions in a loop still hit the budget.
                sh.budget.charge((total / 16) as u64).map_err(abort_error)?;
                let n = n as usize;
                let out = if sep.is_empty() {
                    s.repeat(n)
                } else {
                    let mut unit = s.to_vec();
                    unit.extend_from_slice(&sep);
                    let mut o = unit.repeat(n - 1);
                    o.extend_from_slice(&s);
                    o
                };
                lua.create_string(&out)
            },
        )?,
    )?;
    rust.raw_set(
        "find",
        guarded(lua, sh, "string.find", |lua, sh, (s, p, init, plain): (LuaString, LuaString, Option<i64>, Option<LuaValue>)| {
            let plain = matches!(plain, Some(v) if !matches!(v, LuaValue::Nil | LuaValue::Boolean(false)));
            find_aux(lua, sh, s, p, init, plain, true)
        })?,
    )?;
    rust.raw_set(
        "match",
        guarded(
            lua,
            sh,
            "string.match",
            |lua, sh, (s, p, init): (LuaString, LuaString, Option<i64>)| {
                find_aux(lua, sh, s, p, init, false, false)
            },
        )?,
    )?;
    rust.raw_set(
        "gsub",
        guarded(
            lua,
            sh,
            "string.gsub",
            |lua, sh, args: (LuaString, LuaString, LuaValue, Option<i64>)| gsub(lua, sh, args),
        )?,
    )?;
    rust.raw_set("gmatch", gmatch_fn(lua, sh)?)?;
    rust.raw_set(
        "print",
        guarded(lua, sh, "print", |_lua, sh, args: Variadic<LuaValue>| {
            let mut line = String::new();
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    line.push('\t');
                }
                match a {
                    LuaValue::String(s) => line.push_str(&s.to_string_lossy()),
                    other => line.push_str(&other.to_string()?),
                }
                if line.len() > sh.limits.max_output_bytes {
                    break;
                }
            }
            sh.core.print(&line);
            Ok(())
        })?,
    )?;
    rust.raw_set("error_value", error_value_fn(lua, sh)?)?;
    let prelude: Function = lua
        .load(PRELUDE)
        .set_name("=tavern-prelude")
        .into_function()?;
    let error_mt: Table = prelude.call(rust)?;
    lua.set_named_registry_value(ERROR_MT_KEY, error_mt)?;
    guarded(lua, sh, "ctx.log", ctx_log)
}

/// `string.gmatch(s, p [, init])`: an iterator closure over the matches. The iterator keeps
/// the subject, pattern and position in a Lua table (so no Lua handle lives in Rust).
fn gmatch_fn(lua: &Lua, sh: &Arc<Shared>) -> mlua::Result<Function> {
    guarded(
        lua,
        sh,
        "string.gmatch",
        |lua, sh, (s, p, init): (LuaString, LuaString, Option<i64>)| {
            let state = lua.create_table()?;
            let len = s.as_bytes().len();
            state.raw_set("s", s)?;
            state.raw_set("p", p)?;
            state.raw_set("pos", start_index(init.unwrap_or(1), len) as i64)?;
            state.raw_set("last", -1i64)?;
            let iter = guarded(lua, sh, "gmatch iterator", move |lua, sh, st: Table| {
                let s: LuaString = st.raw_get("s")?;
                let p: LuaString = st.raw_get("p")?;
                let mut pos = st.raw_get::<i64>("pos")? as usize;
                let last: i64 = st.raw_get("last")?;
                let src = s.as_bytes();
                let pat = p.as_bytes();
                let mut m = Matcher::new(&src, &pat, charge_fn(sh));
                let mut out = Vec::new();
                while pos <= src.len() {
                    let e = m.match_at(pos, 0).map_err(|e| pattern_error(e, sh))?;
                    if let Some(e) = e {
                        if e as i64 != last {
                            for c in m.captures(pos, e).map_err(|e| pattern_error(e, sh))? {
                                push_capture(lua, &src, c, &mut out)?;
                            }
                            st.raw_set("pos", e as i64)?;
                            st.raw_set("last", e as i64)?;
                            break;
                        }
                    }
                    pos += 1;
                }
                m.flush().map_err(|e| pattern_error(e, sh))?;
                if out.is_empty() {
                    st.raw_set("pos", (src.len() + 1) as i64)?;
                }
                Ok(MultiValue::from_vec(out))
            })?;
            // `for x in gmatch(...)` calls iter(state, control): the state table is arg 1.
            Ok((iter, state))
        },
    )
}
