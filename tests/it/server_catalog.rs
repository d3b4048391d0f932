//! Resources and prompts over REST (`GET /api/resources`, `/api/resources/read`,
//! `/api/prompts`, `/api/prompts/{name}`), on the conformance fixture home.

use crate::server_support::Server;

use serde_json::{json, Value};

fn home() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/home")
}

#[tokio::test]
async fn rest_lists_and_reads_resources_and_prompts() {
    let server = Server::start(&home(), &[]);
    let c = reqwest::Client::new();
    let get = |path: &str| c.get(format!("{}{path}", server.base)).send();

    let r: Value = get("/api/resources").await.unwrap().json().await.unwrap();
    let uris: Vec<&str> = r["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["uri"].as_str())
        .collect();
    assert!(
        uris.contains(&"test://static-text") && uris.contains(&"tavern://workflows/wait"),
        "{r}"
    );

    let r: Value = get("/api/resources/templates")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        r["resourceTemplates"]
            .to_string()
            .contains("test://template/{id}/data"),
        "{r}"
    );

    let r: Value = get("/api/resources/read?uri=test://static-text")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        r["contents"][0]["text"],
        json!("This is the content of the static text resource."),
        "{r}"
    );
    let r: Value = get("/api/resources/read?uri=tavern://workflows/wait")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        r["contents"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("core:Delay"),
        "{r}"
    );

    let missing = get("/api/resources/read?uri=test://nothing").await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!("unknown_resource"), "{body}");

    let r: Value = get("/api/prompts").await.unwrap().json().await.unwrap();
    let names: Vec<&str> = r["prompts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert!(names.contains(&"test_simple_prompt"), "{r}");

    let r: Value = get("/api/prompts/test_prompt_with_arguments?arg1=x&arg2=y")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        r["messages"][0]["content"]["text"],
        json!("Prompt with arguments: arg1='x', arg2='y'"),
        "{r}"
    );
    let r = c
        .post(format!(
            "{}/api/prompts/test_prompt_with_image",
            server.base
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let r: Value = r.json().await.unwrap();
    assert_eq!(r["messages"][0]["content"]["type"], json!("image"), "{r}");

    let bad = get("/api/prompts/test_prompt_with_arguments?arg1=x")
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let unknown = get("/api/prompts/nope").await.unwrap();
    assert_eq!(unknown.status(), 404);
}

#[test]
fn a_misspelled_key_in_a_resource_declaration_is_a_problem_at_its_line() {
    let home = tempfile::tempdir().expect("temp home");
    let dir = home.path().join("plugins/t");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: t\nresources:\n  - uri: a://b\n    name: b\n    mimetype: text/plain\n    text: hi\n",
    )
    .unwrap();
    let out = std::process::Command::new(crate::server_support::tavern())
        .arg("--home")
        .arg(home.path())
        .args(["plugin", "check"])
        .output()
        .expect("run tavern plugin check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("plugin.yaml:5:5") && text.contains("did you mean `mimeType`?"),
        "{text}"
    );
}
