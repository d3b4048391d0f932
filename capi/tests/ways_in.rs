//! The C ABI leg of the ways-in test (`tests/it/ways_in.rs` runs the others): every case
//! of `tests/data/ways_in/cases.json` through `tavern_engine_call` and through
//! `tavern_engine_submit` / `pump` / `take` must give the results the case expects (tool,
//! called_as, step, ok, value, error code, dispatch), which `tavern call` gives too.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;

use serde_json::{Map, Value};
use tavern_capi::{
    tavern_engine_call, tavern_engine_free, tavern_engine_new, tavern_engine_pump,
    tavern_engine_submit, tavern_engine_take, tavern_last_error, tavern_string_free,
};

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/ways_in/cases.json"
    );
    let text = std::fs::read_to_string(path).expect("read the ways-in cases");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("the cases are JSON");
    assert!(
        !cases.is_empty(),
        "{path} holds no case: the test would prove nothing"
    );
    cases
}

fn project(result: &Value) -> Value {
    let mut m = Map::new();
    for k in ["tool", "called_as", "step", "ok", "value", "dispatch"] {
        if let Some(v) = result.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    if let Some(code) = result.get("error").and_then(|e| e.get("code")) {
        m.insert("error".into(), code.clone());
    }
    Value::Object(m)
}

fn projected(report: &Value) -> Value {
    Value::Array(
        report["results"]
            .as_array()
            .unwrap_or_else(|| panic!("no results in {report}"))
            .iter()
            .map(project)
            .collect(),
    )
}

/// Takes ownership of a string the C ABI returned.
fn owned(p: *mut c_char) -> Value {
    assert!(!p.is_null(), "{}", last_error());
    // SAFETY: non-NULL, NUL-terminated, returned by the C ABI and not yet freed.
    let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
    // SAFETY: returned by the C ABI, freed once.
    unsafe { tavern_string_free(p) };
    serde_json::from_str(&s).unwrap()
}

fn last_error() -> String {
    let p = tavern_last_error();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: tavern_last_error returns NULL or a NUL-terminated string it keeps.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[test]
fn the_c_abi_answers_every_case_as_tavern_call_does() {
    let home = std::env::temp_dir().join(format!("tavern-capi-ways-in-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let home_c = CString::new(home.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let engine = unsafe { tavern_engine_new(home_c.as_ptr()) };
    assert!(!engine.is_null(), "{}", last_error());
    let mut checked = 0;
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let body = match &case["body"] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let body = CString::new(body).unwrap();
        // SAFETY: a live engine and a valid NUL-terminated text.
        let report = owned(unsafe { tavern_engine_call(engine, body.as_ptr()) });
        assert_eq!(projected(&report), case["expect"], "{name}: {report}");
        // SAFETY: as above.
        let ticket = unsafe { tavern_engine_submit(engine, body.as_ptr()) };
        assert_ne!(ticket, 0, "{}", last_error());
        let taken = loop {
            // SAFETY: a live engine.
            unsafe { tavern_engine_pump(engine, 1000) };
            // SAFETY: a live engine and a ticket it gave.
            let p = unsafe { tavern_engine_take(engine, ticket) };
            if !p.is_null() {
                break owned(p);
            }
        };
        assert_eq!(taken, report, "{name}: submit/take differs from call");
        checked += 1;
    }
    assert!(checked > 0);
    // SAFETY: made by tavern_engine_new, freed once.
    unsafe { tavern_engine_free(engine) };
    let _ = std::fs::remove_dir_all(&home);
}
