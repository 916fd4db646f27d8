//! The JSON document of a run: the serialized result model, as the schema describes.

use wirerate_core::RunResult;

/// Pretty-printed JSON of one result.
pub fn result(r: &RunResult) -> String {
    // Our types serialize infallibly (string keys, no custom serializers).
    serde_json::to_string_pretty(r).unwrap_or_default()
}
