//! `api.store` for Lua and Rhai plugins: get/set/incr/delete with times to live, keys
//! private to each plugin, and one store shared by several engines (as replicas of a served
//! home share one Redis; `store_redis.rs` runs the same over a real Redis).

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use tavern::internal::tools::Caller;
use tavern::{Engine, KvStore, MemoryStore};

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn home() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    write(&t.path().join("plugins/L/plugin.yaml"), "name: L\n");
    write(
        &t.path().join("plugins/L/main.lua"),
        r#"
api.tools.register{ id = "bump", description = "counts", handler = function(args)
  return api.store.incr("n", args.by, args.ttl) end }
api.tools.register{ id = "put", description = "keeps", handler = function(args)
  api.store.set(args.k, args.v, args.ttl) return api.store.get(args.k) end }
api.tools.register{ id = "peek", description = "reads", handler = function(args)
  local v = api.store.get(args.k) if v == nil then return "nil" end return v end }
api.tools.register{ id = "drop", description = "deletes", handler = function(args)
  return api.store.delete(args.k) end }
"#,
    );
    write(&t.path().join("plugins/R/plugin.yaml"), "name: R\n");
    write(
        &t.path().join("plugins/R/main.rhai"),
        r#"
fn bump(args, ctx) { api::store::incr("n", 10, 60) }
fn peek(args, ctx) { let v = api::store::get(args.k); if v == () { "nil" } else { v } }
fn put(args, ctx) { api::store::set(args.k, args.v); api::store::get(args.k) }
api::tools::register(#{ id: "bump", description: "counts", handler: "bump" });
api::tools::register(#{ id: "peek", description: "reads", handler: "peek" });
api::tools::register(#{ id: "put", description: "keeps", handler: "put" });
"#,
    );
    t
}

async fn call(e: &Engine, tool: &str, args: Value) -> Result<Value, tavern::ToolError> {
    e.tools().invoke(tool, args, Caller::Cli).await
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_keep_values_count_and_delete_in_their_own_namespace() {
    let t = home();
    let e = Engine::builder().home(t.path()).build().unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    assert_eq!(call(&e, "L:bump", json!({})).await.unwrap(), json!(1));
    assert_eq!(
        call(&e, "L:bump", json!({"by": 4})).await.unwrap(),
        json!(5)
    );
    let v = json!({"a": [1, 2], "b": "x"});
    assert_eq!(
        call(&e, "L:put", json!({"k": "doc", "v": v}))
            .await
            .unwrap(),
        v
    );
    // Rhai has its own keys: L's "n" and "doc" are not R's.
    assert_eq!(call(&e, "R:bump", json!({})).await.unwrap(), json!(10));
    assert_eq!(
        call(&e, "R:peek", json!({"k": "doc"})).await.unwrap(),
        json!("nil")
    );
    assert_eq!(
        call(&e, "R:put", json!({"k": "doc", "v": 7}))
            .await
            .unwrap(),
        json!(7)
    );
    assert_eq!(call(&e, "L:peek", json!({"k": "doc"})).await.unwrap(), v);
    assert_eq!(
        call(&e, "L:drop", json!({"k": "doc"})).await.unwrap(),
        json!(true)
    );
    assert_eq!(
        call(&e, "L:drop", json!({"k": "doc"})).await.unwrap(),
        json!(false)
    );
    assert_eq!(
        call(&e, "L:peek", json!({"k": "doc"})).await.unwrap(),
        json!("nil")
    );
    // A value that is not an integer cannot be counted; a bad time to live is refused.
    call(&e, "L:put", json!({"k": "n", "v": "text"}))
        .await
        .unwrap();
    let err = call(&e, "L:bump", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("not_an_integer"), "{err}");
    let err = call(&e, "L:put", json!({"k": "t", "v": 1, "ttl": -1}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ttl_s"), "{err}");
    // A short time to live expires.
    call(&e, "L:put", json!({"k": "t", "v": 1, "ttl": 0.05}))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    assert_eq!(
        call(&e, "L:peek", json!({"k": "t"})).await.unwrap(),
        json!("nil")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn engines_given_one_store_share_it() {
    let t = home();
    let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let a = Engine::builder()
        .home(t.path())
        .kv_store(store.clone())
        .build()
        .unwrap();
    let b = Engine::builder()
        .home(t.path())
        .kv_store(store)
        .build()
        .unwrap();
    assert_eq!(call(&a, "L:bump", json!({})).await.unwrap(), json!(1));
    assert_eq!(call(&b, "L:bump", json!({})).await.unwrap(), json!(2));
    // Without a shared store each engine counts alone.
    let c = Engine::builder().home(t.path()).build().unwrap();
    assert_eq!(call(&c, "L:bump", json!({})).await.unwrap(), json!(1));
}
