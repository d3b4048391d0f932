//! Threat: file access outside the plugin's declared root (`..`, absolute paths, symlinks,
//! sibling prefixes, NUL bytes), and file functions used without the permission.

use crate::common;

use std::path::PathBuf;

use common::*;
use serde_json::json;
use tavern::internal::script::{Permissions, PluginScripts, ScriptEnv, ScriptSource};

const FS_LUA: &str = r#"
function write(a) api.fs.write(a.path, a.content) return api.fs.read(a.path) end
function append(a) api.fs.append(a.path, a.content) return api.fs.read(a.path) end
function read(a) return api.fs.read(a.path) end
function list(a) return api.fs.list(a.path) end
function exists(a) return api.fs.exists(a.path) end
function remove(a) api.fs.remove(a.path) return api.fs.exists(a.path) end
function mkdir(a) api.fs.mkdir(a.path) return api.fs.exists(a.path) end
function ping(a) return {pong = a.n} end
"#;

fn fs_plugin(perms: Permissions) -> PluginScripts {
    let mut env = ScriptEnv::new("files", std::env::temp_dir());
    env.limits = test_limits();
    env.permissions = perms;
    PluginScripts::from_sources(env, vec![ScriptSource::new("main.lua", FS_LUA).unwrap()]).unwrap()
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(d.path().join("secret.txt"), "secret").unwrap();
    std::fs::create_dir_all(d.path().join("ws-sibling")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.path(), root.join("up")).unwrap();
        std::os::unix::fs::symlink(d.path().join("secret.txt"), root.join("link.txt")).unwrap();
    }
    (d, root)
}

#[test]
fn chroot_paths_work() {
    let (_d, root) = setup();
    let p = fs_plugin(Permissions {
        fs_write: vec![root.clone()],
        ..Default::default()
    });
    assert_eq!(
        call(
            &p,
            "write",
            json!({"path": "/logs/today.log", "content": "a\n"})
        )
        .unwrap(),
        json!("a\n")
    );
    assert_eq!(
        call(
            &p,
            "append",
            json!({"path": "logs/today.log", "content": "b\n"})
        )
        .unwrap(),
        json!("a\nb\n")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("logs/today.log")).unwrap(),
        "a\nb\n"
    );
    assert_eq!(
        call(&p, "mkdir", json!({"path": "x/y/z"})).unwrap(),
        json!(true)
    );
    let list = call(&p, "list", json!({"path": "/logs"})).unwrap();
    assert_eq!(
        list,
        json!([{"name": "today.log", "type": "file", "size": 4}])
    );
    assert_eq!(
        call(&p, "remove", json!({"path": "/logs/today.log"})).unwrap(),
        json!(false)
    );
}

#[test]
fn escapes_are_refused() {
    let (d, root) = setup();
    let p = fs_plugin(Permissions {
        fs_write: vec![root.clone()],
        ..Default::default()
    });
    let bad = [
        "../secret.txt",
        "/../secret.txt",
        "a/../../secret.txt",
        "../ws-sibling/x.txt",
        "up/secret.txt",
        "link.txt",
        "a\0b",
    ];
    for path in bad {
        for f in ["write", "read", "append", "remove", "exists", "list"] {
            let e = within(bound(&test_limits()), || {
                call(&p, f, json!({"path": path, "content": "pwned"}))
            })
            .unwrap_err();
            assert_eq!(e.kind(), "path_refused", "{f}({path:?}): {e}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(d.path().join("secret.txt")).unwrap(),
        "secret"
    );
    assert!(!d.path().join("ws-sibling/x.txt").exists());
    assert_usable(&p);
}

#[test]
fn missing_permission_is_named() {
    let (_d, root) = setup();
    let none = fs_plugin(Permissions::default());
    let e = call(&none, "read", json!({"path": "a"})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "permission 'fs.read' not declared in plugin.yaml"
    );
    let read_only = fs_plugin(Permissions {
        fs_read: vec![root.clone()],
        ..Default::default()
    });
    std::fs::write(root.join("r.txt"), "ro").unwrap();
    assert_eq!(
        call(&read_only, "read", json!({"path": "/r.txt"})).unwrap(),
        json!("ro")
    );
    for f in ["write", "append", "remove", "mkdir"] {
        let e = call(&read_only, f, json!({"path": "r.txt", "content": "x"})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "permission 'fs.write' not declared in plugin.yaml",
            "{f}"
        );
        let te = e.into_tool_error("files:x");
        assert_eq!(te.code(), "permission_denied");
    }
    assert_eq!(std::fs::read_to_string(root.join("r.txt")).unwrap(), "ro");
}

#[test]
fn rhai_fs_uses_the_same_rules() {
    let (_d, root) = setup();
    let mut env = ScriptEnv::new("rfiles", std::env::temp_dir());
    env.permissions = Permissions {
        fs_write: vec![root.clone()],
        ..Default::default()
    };
    let p = PluginScripts::from_sources(
        env,
        vec![ScriptSource::new(
            "main.rhai",
            "fn w(a) { api::fs::write(a.path, \"hi\"); api::fs::read(a.path) }",
        )
        .unwrap()],
    )
    .unwrap();
    assert_eq!(
        call(&p, "w", json!({"path": "/r/x.txt"})).unwrap(),
        json!("hi")
    );
    let e = call(&p, "w", json!({"path": "../x.txt"})).unwrap_err();
    assert_eq!(e.kind(), "path_refused", "{e}");
}
