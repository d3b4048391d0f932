//! Threat: Rhai `import` reading files outside the plugin directory, and snippets importing
//! at all.

use crate::common;

use common::*;
use serde_json::json;
use tavern::internal::script::{run_snippet, Lang, Limits, PluginScripts, ScriptEnv, ScriptSource};

#[test]
fn imports_confined_to_plugin_dir() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("plugin");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/util.rhai"), "fn twice(x) { x * 2 }").unwrap();
    std::fs::write(d.path().join("outside.rhai"), "fn twice(x) { 666 }").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(d.path().join("outside.rhai"), dir.join("sneaky.rhai")).unwrap();
    let outside = d.path().join("outside").to_string_lossy().into_owned();
    let src = format!(
        r#"fn ok(a) {{ import "lib/util" as u; u::twice(21) }}
           fn up(a) {{ import "../outside" as o; o::twice(1) }}
           fn abs(a) {{ import "{outside}" as o; o::twice(1) }}
           fn link(a) {{ import "sneaky" as o; o::twice(1) }}
           {PING_RHAI}"#
    );
    let mut env = ScriptEnv::new("imp", &dir);
    env.limits = test_limits();
    let p = PluginScripts::from_sources(env, vec![ScriptSource::new("main.rhai", src).unwrap()])
        .unwrap();
    assert_eq!(call(&p, "ok", json!({})).unwrap(), json!(42));
    for f in ["up", "abs", "link"] {
        let e = within(bound(&test_limits()), || call(&p, f, json!({}))).unwrap_err();
        assert!(e.to_string().contains("refused"), "{f}: {e}");
        assert_usable(&p);
    }
}

#[test]
fn snippets_cannot_import() {
    let e = run_snippet(
        Lang::Rhai,
        "import \"x\" as x; 1",
        json!({}),
        &Limits::strict(),
    )
    .unwrap_err();
    assert!(["runtime", "value_limit"].contains(&e.kind()), "{e:?}");
}
