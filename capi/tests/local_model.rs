//! The C ABI's local model (issue 38, `--features llm-local`): a host passes a GGUF path with
//! `tavern_engine_set_local_model`, and a workflow's `llm:Chat` node, called through
//! `tavern_engine_call`, answers from SmolLM2-135M run in the process. The model file is the
//! one `.ci/smollm2.sh` fetches (`TAVERN_SMOLLM2` names another).
#![cfg(feature = "llm-local")]

use std::ffi::{CStr, CString};
use std::path::PathBuf;

use serde_json::Value;
use tavern_capi::{
    tavern_engine_build, tavern_engine_call, tavern_engine_free, tavern_engine_new,
    tavern_engine_set_local_model, tavern_last_error, tavern_string_free,
};

fn model() -> PathBuf {
    let p = match std::env::var_os("TAVERN_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/tavern-models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    assert!(
        p.is_file(),
        "{} is missing: run `bash .ci/smollm2.sh`, or set TAVERN_SMOLLM2",
        p.display()
    );
    p
}

fn last_error() -> String {
    let e = tavern_last_error();
    if e.is_null() {
        return String::new();
    }
    // SAFETY: a non-NULL last error is a NUL-terminated string valid until the next call.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

#[test]
fn a_c_host_runs_a_workflow_on_the_local_model() {
    let home = std::env::temp_dir().join(format!("tavern-capi-local-{}", std::process::id()));
    std::fs::create_dir_all(home.join("workflows")).unwrap();
    std::fs::write(
        home.join("workflows/ask.json"),
        serde_json::json!({
            "id": "ask",
            "interfaceInputs": {"prompt": {"dataFlowType": "STRING", "required": true}},
            "interfaceOutputs": {"text": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "chat", "type": "llm:Chat", "configValues":
                    {"max_tokens": 12, "temperature": 0, "threads": 2, "context_size": 512}},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "in", "sourceHandle": "prompt", "target": "chat", "targetHandle": "prompt"},
                {"source": "chat", "sourceHandle": "text", "target": "out", "targetHandle": "text"}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let c_home = CString::new(home.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path for the call.
    let engine = unsafe { tavern_engine_new(c_home.as_ptr()) };
    assert!(!engine.is_null(), "{}", last_error());
    let missing = CString::new("models/none.gguf").unwrap();
    // SAFETY: a live engine and a NUL-terminated path.
    assert_eq!(
        unsafe { tavern_engine_set_local_model(engine, missing.as_ptr()) },
        -1
    );
    assert!(last_error().contains("no such file"), "{}", last_error());
    let path = CString::new(model().to_str().unwrap()).unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { tavern_engine_set_local_model(engine, path.as_ptr()) },
        0,
        "{}",
        last_error()
    );
    // SAFETY: a live engine.
    assert_eq!(
        unsafe { tavern_engine_build(engine) },
        0,
        "{}",
        last_error()
    );
    // After the build: refused, saying why.
    // SAFETY: as above.
    assert_eq!(
        unsafe { tavern_engine_set_local_model(engine, path.as_ptr()) },
        -1
    );
    assert!(last_error().contains("built already"), "{}", last_error());
    let call = CString::new(
        "<|[REQUEST_TOOL]|>\ncommand:「始」workflow:ask「末」\nprompt:「始」Say hello to the innkeeper.「末」\n<|[END_TOOL]|>",
    )
    .unwrap();
    // SAFETY: a live engine and a NUL-terminated body.
    let out = unsafe { tavern_engine_call(engine, call.as_ptr()) };
    assert!(!out.is_null(), "{}", last_error());
    // SAFETY: the library's own NUL-terminated string, freed right after.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `out` came from the library and is freed once.
    unsafe { tavern_string_free(out) };
    // SAFETY: the engine is freed once, nothing uses it after.
    unsafe { tavern_engine_free(engine) };
    let _ = std::fs::remove_dir_all(&home);
    let v: Value = serde_json::from_str(&text).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{v:#}");
    // A workflow with one output gives that output as its value.
    let answer = r["value"].as_str().unwrap_or_default();
    assert!(!answer.trim().is_empty(), "the model answered: {v:#}");
}
