//! Environment overrides: `CTXD_<SECTION>_<KEY>=value` sets `<section>.<key>` on top of the
//! file, before the raw layer reads it; problems with such a key name the variable.

use crate::settings::PipelineConfig;

/// An override: the variable's name, the key's path, the value.
pub type Override = (String, Vec<String>, toml::Value);

/// The sections environment overrides may address (`CTXD_<SECTION>_<KEY>`).
const SECTIONS: &[&str] = &["source", "index", "model", "chunk", "pipeline", "server", "aggregate"];

/// Variables that look like `CTXD_<SECTION>_<KEY>` but are not config keys: the model cache
/// directory (`ctxd_models`; the container images set it).
const NOT_KEYS: &[&str] = &["CTXD_MODEL_DIR"];

/// The overrides found in `vars`: `CTXD_<SECTION>_<KEY>=value` sets `<section>.<key>`
/// (`__` inside the key nests deeper: `CTXD_PIPELINE_EMBED__WORKERS=2` sets
/// `pipeline.embed.workers`). Other `CTXD_*` variables (`CTXD_LOG`, `CTXD_AUTH_TOKEN`,
/// `CTXD_MODEL_DIR`) are not config keys and are ignored. Values are TOML scalars (`true`, `42`, `"text"`); anything else
/// is taken as a string.
pub fn env_overrides(vars: impl IntoIterator<Item = (String, String)>) -> Vec<Override> {
    let mut out = Vec::new();
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix("CTXD_") else { continue };
        if NOT_KEYS.contains(&name.as_str()) {
            continue;
        }
        let rest = rest.to_ascii_lowercase();
        let Some((section, key)) = rest.split_once('_') else { continue };
        if !SECTIONS.contains(&section) || key.is_empty() {
            continue;
        }
        let mut path = vec![section.to_string()];
        path.extend(key.split("__").map(str::to_string));
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .filter(|v| !matches!(v, toml::Value::Table(_) | toml::Value::Array(_)))
            .unwrap_or_else(|| toml::Value::String(value.clone()));
        out.push((name, path, parsed));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A stage's `{capacity, workers}` table has no per-key defaults: an override of one key of a
/// stage the file does not mention starts from that stage's defaults.
fn seed_stage_defaults(table: &mut toml::Table, path: &[String]) {
    let [section, stage, _] = path else { return };
    if section != "pipeline" {
        return;
    }
    let d = PipelineConfig::default();
    let tuning = match stage.as_str() {
        "load" => d.load,
        "chunk" => d.chunk,
        "embed" => d.embed,
        "upsert" => d.upsert,
        _ => return,
    };
    let pipeline = table.entry("pipeline").or_insert_with(|| toml::Value::Table(Default::default()));
    if let toml::Value::Table(p) = pipeline {
        p.entry(stage.clone()).or_insert_with(|| {
            let mut t = toml::Table::new();
            t.insert("capacity".into(), toml::Value::Integer(tuning.capacity as i64));
            t.insert("workers".into(), toml::Value::Integer(tuning.workers as i64));
            toml::Value::Table(t)
        });
    }
}

/// Sets every override in `table`; returns each key set, with the variable that set it. Fails
/// when an override's path runs through a value that is not a table.
pub(crate) fn apply(table: &mut toml::Table, overrides: Vec<Override>) -> Result<Vec<(Vec<String>, String)>, String> {
    let mut from_env = Vec::new();
    for (name, path, value) in overrides {
        seed_stage_defaults(table, &path);
        let mut at = &mut *table;
        for part in &path[..path.len() - 1] {
            let entry = at.entry(part.clone()).or_insert_with(|| toml::Value::Table(Default::default()));
            at = match entry {
                toml::Value::Table(t) => t,
                _ => return Err(format!("{name}: {} is not a table", path.join("."))),
            };
        }
        at.insert(path[path.len() - 1].clone(), value);
        from_env.push((path, name));
    }
    Ok(from_env)
}
