//! The LuaLS definition file is generated from the same registry the engine registers, and
//! the checked-in copy must not be stale. Regenerate with
//! `TAVERN_BLESS=1 cargo test --test it script_luals`.

use crate::common;

use common::*;
use serde_json::json;
use tavern::internal::script::api::API;
use tavern::internal::script::luals_definitions;

#[test]
fn checked_in_luals_file_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/lua/tavern.lua");
    let fresh = luals_definitions();
    if std::env::var_os("TAVERN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "docs/lua/tavern.lua is stale; run `TAVERN_BLESS=1 cargo test --test it script_luals`"
    );
}

#[test]
fn every_registry_entry_is_registered_in_lua_and_rhai() {
    let lua = plugin(
        "reg",
        &[(
            "main.lua",
            "function kind(a) return type(api[a.ns][a.name]) end",
        )],
    );
    for f in API {
        let k = call(&lua, "kind", json!({"ns": f.namespace, "name": f.name})).unwrap();
        assert_eq!(
            k,
            json!("function"),
            "api.{}.{} missing in Lua",
            f.namespace,
            f.name
        );
        let defined =
            luals_definitions().contains(&format!("function api.{}.{}(", f.namespace, f.name));
        assert!(
            defined,
            "api.{}.{} missing in the LuaLS file",
            f.namespace, f.name
        );
    }
    // Rhai: calling each function with wrong arguments must fail with a runtime error from
    // the function, not "function not found".
    for f in API {
        let args = vec!["()"; f.params.iter().filter(|p| !p.optional).count()].join(", ");
        let src = format!(
            "fn probe() {{ api::{}::{}({args}) }}",
            f.namespace,
            f.rhai_name()
        );
        let p = plugin("rreg", &[("main.rhai", &src)]);
        if let Err(e) = call(&p, "probe", json!({})) {
            assert!(
                !e.to_string().contains("not found"),
                "api::{}::{}: {e}",
                f.namespace,
                f.name
            );
        }
    }
}
