//! Agent profiles are strict like plugin manifests: an unknown key is a problem at its own
//! line and column with a did-you-mean; the seed's other profile fields are accepted.

use std::path::Path;

use tavern::internal::agent::AgentProfile;

#[test]
fn a_misspelt_profile_key_is_a_problem_at_its_line_with_a_suggestion() {
    let text = "{\n  \"id\": \"inn\",\n  \"tool_ids_inventry\": [\"system:echo\"]\n}\n";
    let err = AgentProfile::from_json(text, Path::new("agents/inn.json")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("agents/inn.json:3:3:"), "{msg}");
    assert!(msg.contains("tool_ids_inventry"), "{msg}");
    assert!(msg.contains("tool_ids_inventory"), "{msg}");
}

#[test]
fn the_seed_profile_fields_are_accepted_and_kept() {
    let text = r#"{"id": "inn", "version": "1.0", "schema_version": "1",
        "subscribed_event_types": ["door"], "knowledge_base_references": [],
        "initial_goals_reference": "g", "initial_private_state_schema": {},
        "tool_ids_inventory": ["system:echo"]}"#;
    let p = AgentProfile::from_json(text, Path::new("agents/inn.json")).unwrap();
    assert_eq!(p.extra["subscribed_event_types"][0], "door");
    assert_eq!(p.tool_ids_inventory, vec!["system:echo".to_string()]);
}
