//! A job's spec as data (issue 28, "one job spec, many faces"): a Python wrapper passes its
//! keywords as one JSON object, and [`place`] puts each into the facade's job spec, whose serde
//! form is the one place the job's parameters are listed. A keyword names the spec field of the
//! same name, at the top or inside a nested group (`output`, `picard`, `samblaster`), but for the
//! few [`renamed`] ones and the face groups [`order`] and `no_pg`; a keyword that names no field is
//! refused with an `ArgumentError` naming it. `null` keeps the field's default.
//!
//! The keywords only a face has (the runtime's `threads`, `max_memory`, `progress`) are not part of
//! a spec: Python's list of them is `sortase._FACE_KEYWORDS`.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use sortase::view::parse_flags;
use sortase::{
    AgdExportJob, AgdImportJob, BgzipJob, Error, ErrorKind, FaidxJob, Fq2BamJob, IndexJob,
    MarkdupJob, MergeJob, Order, OutputSpec, Program, Result, SnpPileupJob, SortJob, ViewJob,
};

/// The jobs whose Python face passes its spec as data.
pub const KINDS: &[&str] = &[
    "sort",
    "merge",
    "markdup",
    "view",
    "fq2bam",
    "faidx",
    "snp_pileup",
    "index",
    "bgzip",
    "agd_import",
    "agd_export",
];

/// The keywords of the face group `order` (samtools' `-n -N -t --template-coordinate`).
const ORDER_KEYWORDS: &[&str] = &["by_name", "by_name_lex", "tag", "template_coordinate"];

/// The keywords that name their spec field otherwise (samtools' long option against the spec's
/// name): `(job, or "" for all, keyword, field)`.
const RENAMES: &[(&str, &str, &str)] = &[
    ("", "output", "path"),
    ("", "output_fmt", "format"),
    ("", "output_fmt_options", "format_options"),
    ("merge", "header", "header_file"),
    ("view", "expr", "expression"),
    ("view", "target_file", "targets_file"),
    ("view", "tag", "tags"),
    ("view", "use_index", "multi_region"),
    ("markdup", "accept_dup_marks", "accept_dups"),
    ("markdup", "remove_dups", "remove_duplicates"),
    ("markdup", "min_clip_size", "min_clip"),
    ("faidx", "length", "line_length"),
    ("faidx", "continue_", "keep_going"),
    ("faidx", "fai_idx", "fai_index"),
    ("faidx", "gzi_idx", "gzi_index"),
    ("agd_import", "input", "inputs"),
    ("agd_import", "rg", "read_group"),
    ("agd_import", "rg_line", "read_group_line"),
    ("agd_import", "level", "zstd_level"),
];

/// The spec field `keyword` names in job `kind` (one of `fields`; the renames for all jobs apply
/// to those that have the field: faidx's `output` is a field of its own).
fn renamed<'a>(kind: &str, keyword: &'a str, fields: &[&str]) -> &'a str {
    RENAMES
        .iter()
        .find(|(k, from, to)| {
            (k.is_empty() || *k == kind) && *from == keyword && fields.contains(to)
        })
        .map_or(keyword, |(_, _, to)| to)
}

/// The keyword of spec field `field` in job `kind` (the inverse of [`renamed`]).
fn keyword_of<'a>(kind: &str, field: &'a str) -> &'a str {
    RENAMES
        .iter()
        .find(|(k, _, to)| (k.is_empty() || *k == kind) && *to == field)
        .map_or(field, |(_, from, _)| from)
}

/// The default spec of `kind` as JSON.
pub fn default_spec(kind: &str) -> Result<Value> {
    let out = OutputSpec::default;
    match kind {
        "sort" => to_value(&SortJob::new("", out())),
        "merge" => to_value(&MergeJob::new(Vec::new(), out())),
        "markdup" => to_value(&MarkdupJob::new("", out())),
        "view" => to_value(&ViewJob::new("", out())),
        "fq2bam" => to_value(&Fq2BamJob::new("", "", out())),
        "faidx" => to_value(&FaidxJob::new("")),
        "snp_pileup" => to_value(&SnpPileupJob::new("", "", Vec::new())),
        "index" => to_value(&IndexJob::new("")),
        "bgzip" => to_value(&BgzipJob::default()),
        "agd_import" => to_value(&AgdImportJob::from_fastq(Default::default(), "")),
        "agd_export" => to_value(&AgdExportJob::new("", out())),
        other => Err(Error::argument(format!(
            "no job {other:?} takes a spec (one of {})",
            KINDS.join(", ")
        ))),
    }
}

fn to_value<T: Serialize>(spec: &T) -> Result<Value> {
    serde_json::to_value(spec).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))
}

/// The fields of a spec that take a keyword each: `(path of the group, field)`; the groups
/// `order` and `program` are filled from face keywords instead, and `command_line` from the call.
fn leaves(spec: &Map<String, Value>) -> Vec<(Option<&str>, &str)> {
    let mut out = Vec::new();
    for (key, value) in spec {
        match (key.as_str(), value) {
            ("order" | "program" | "command_line", _) => {}
            (group, Value::Object(fields)) => {
                out.extend(fields.keys().map(|f| (Some(group), f.as_str())));
            }
            (field, _) => out.push((None, field)),
        }
    }
    out
}

/// The keywords the spec of `kind` takes, each with its default: one per field (named as the
/// Python keyword), plus the face groups' keywords (`false`/`null`).
pub fn keywords(kind: &str) -> Result<Map<String, Value>> {
    let spec = default_spec(kind)?;
    let spec = spec.as_object().expect("a job spec is a JSON object");
    let mut out: Map<String, Value> = leaves(spec)
        .into_iter()
        .map(|(g, f)| {
            let value = match g {
                Some(g) => spec[g][f].clone(),
                None => spec[f].clone(),
            };
            (keyword_of(kind, f).to_string(), value)
        })
        .collect();
    if spec.contains_key("order") {
        for k in ORDER_KEYWORDS {
            let default = if *k == "tag" {
                Value::Null
            } else {
                Value::Bool(false)
            };
            out.insert(k.to_string(), default);
        }
    }
    if spec.contains_key("program") {
        out.insert("no_pg".into(), Value::Bool(false));
    }
    Ok(out)
}

/// The `order` face group: samtools sort's and merge's flags → the spec's order.
fn order(kind: &str, given: &mut Map<String, Value>) -> Result<Value> {
    let mut flag = |name: &str| -> Result<bool> {
        match given.remove(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(v) => Err(Error::argument(format!(
                "{kind}: {name}={v}: not True or False"
            ))),
        }
    };
    let (by_name, by_name_lex) = (flag("by_name")?, flag("by_name_lex")?);
    let template_coordinate = flag("template_coordinate")?;
    let tag = match given.remove("tag") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t),
        Some(v) => return Err(Error::argument(format!("{kind}: tag={v}: not a str"))),
    };
    let order = Order::from_flags(by_name, by_name_lex, tag.as_deref())
        .with_template_coordinate(template_coordinate)?;
    to_value(&order)
}

/// The spec of `kind` from a face's keywords (`given`, a JSON object): each keyword placed into
/// the default spec; `program` is `call`'s `@PG` line unless `no_pg`, and `command_line` (a
/// dataset's provenance) is `call`'s line.
pub fn place(kind: &str, given: &str, call: impl FnOnce(&Value) -> String) -> Result<Value> {
    let mut given: Map<String, Value> = serde_json::from_str(given)
        .map_err(|e| Error::argument(format!("{kind}: the keywords are not a JSON object: {e}")))?;
    let mut spec = default_spec(kind)?;
    let obj = spec.as_object_mut().expect("a job spec is a JSON object");
    if obj.contains_key("order") {
        obj.insert("order".into(), order(kind, &mut given)?);
    }
    let no_pg =
        obj.contains_key("program") && matches!(given.remove("no_pg"), Some(Value::Bool(true)));
    let fields: Vec<(Option<String>, String)> = leaves(obj)
        .into_iter()
        .map(|(g, f)| (g.map(str::to_string), f.to_string()))
        .collect();
    let names: Vec<&str> = fields.iter().map(|(_, f)| f.as_str()).collect();
    for (keyword, mut value) in given {
        let field = renamed(kind, &keyword, &names);
        let Some((group, _)) = fields.iter().find(|(_, f)| f == field) else {
            return Err(Error::argument(format!(
                "{kind}: no keyword {keyword:?} (the spec has no such field)"
            )));
        };
        if value.is_null() {
            continue;
        }
        if let (true, Value::String(text)) = (field.ends_with("_flags"), &value) {
            value = Value::from(parse_flags(text)?);
        }
        let target = match group {
            Some(g) => obj[g.as_str()].as_object_mut().expect("a group"),
            None => &mut *obj,
        };
        target.insert(field.to_string(), value);
    }
    let provenance = obj.contains_key("command_line");
    let pg = obj.contains_key("program") && !no_pg;
    if pg || provenance {
        let line = call(&spec);
        if provenance {
            spec["command_line"] = Value::from(line.clone());
        }
        if pg {
            spec["program"] = to_value(&Program::new(line))?;
        }
    }
    Ok(spec)
}

/// Why a spec did not deserialise: a value of the wrong type (Python's `TypeError`), or of the
/// right type but not one the field takes (`ArgumentError`); the message names the keyword.
pub struct SpecError {
    /// A value of the wrong type.
    pub wrong_type: bool,
    /// The error.
    pub error: Error,
}

/// `spec` as the job `T`.
pub fn typed<T: DeserializeOwned>(kind: &str, spec: Value) -> std::result::Result<T, SpecError> {
    serde_json::from_value::<T>(spec.clone()).map_err(|e| {
        let keyword = culprit(kind, &spec)
            .map(|k| format!("{k}: "))
            .unwrap_or_default();
        SpecError {
            wrong_type: e.to_string().starts_with("invalid type"),
            error: Error::argument(format!("{kind}: {keyword}{e}")),
        }
    })
}

/// The keyword whose value alone makes the default spec of `kind` fail to deserialise.
fn culprit(kind: &str, spec: &Value) -> Option<String> {
    let default = default_spec(kind).ok()?;
    let obj = spec.as_object()?;
    let check = |patched: Value| match kind {
        "sort" => serde_json::from_value::<SortJob>(patched).is_err(),
        "merge" => serde_json::from_value::<MergeJob>(patched).is_err(),
        "markdup" => serde_json::from_value::<MarkdupJob>(patched).is_err(),
        "fq2bam" => serde_json::from_value::<Fq2BamJob>(patched).is_err(),
        "faidx" => serde_json::from_value::<FaidxJob>(patched).is_err(),
        "snp_pileup" => serde_json::from_value::<SnpPileupJob>(patched).is_err(),
        "index" => serde_json::from_value::<IndexJob>(patched).is_err(),
        "bgzip" => serde_json::from_value::<BgzipJob>(patched).is_err(),
        "agd_import" => serde_json::from_value::<AgdImportJob>(patched).is_err(),
        "agd_export" => serde_json::from_value::<AgdExportJob>(patched).is_err(),
        _ => serde_json::from_value::<ViewJob>(patched).is_err(),
    };
    for (group, field) in leaves(obj) {
        let mut patched = default.clone();
        let value = match group {
            Some(g) => spec[g][field].clone(),
            None => spec[field].clone(),
        };
        match group {
            Some(g) => patched[g][field] = value,
            None => patched[field] = value,
        }
        if check(patched) {
            return Some(keyword_of(kind, field).to_string());
        }
    }
    None
}

/// One keyword of a job's Python face: the spec field (or face group flag) it sets, described by
/// the CLI flag declared on that field, so the wrapper's signature and docstring are built from the
/// spec (python/sortase/__init__.py, `_takes_spec`): a new option is written once, with its flag.
#[derive(Debug, Serialize)]
pub struct Keyword {
    /// The Python keyword.
    pub name: String,
    /// The spec's default (`null`: none, or the spec's own).
    pub default: Value,
    /// The Python annotation, in the names `sortase/__init__.py` imports (`Optional[int]`, ...).
    pub annotation: String,
    /// The flag as `sortase KIND --help` spells it (`-l, --level`; empty for a positional).
    pub flag: String,
    /// The flag's `--help` text.
    pub help: String,
}

/// The flags of job `kind` as its command declares them: the spec's own fields (`clap::Args` on
/// the spec and its groups) and the face groups it takes (`-n/-N/-t`, `--template-coordinate`,
/// `--no-PG`). The few keywords whose flag the CLI builds another way (markdup's `--mode` and
/// `--metrics`, view's output flags, which have samtools view's spelling) are declared by their
/// Python wrapper.
fn command(kind: &str) -> Result<clap::Command> {
    use clap::Args;
    use sortase::options::{NoPg, OrderFlags, TemplateCoordinateFlag};
    let c = clap::Command::new("job");
    let c = match kind {
        "sort" => {
            TemplateCoordinateFlag::augment_args(OrderFlags::augment_args(SortJob::augment_args(c)))
        }
        "merge" => OrderFlags::augment_args(MergeJob::augment_args(c)),
        "markdup" => {
            use sortase::markdup::{PicardOptions, SamblasterOptions};
            PicardOptions::augment_args(SamblasterOptions::augment_args(MarkdupJob::augment_args(
                c,
            )))
        }
        "view" => ViewJob::augment_args(c),
        "fq2bam" => Fq2BamJob::augment_args(c),
        // No header written: no --no-PG.
        "faidx" => return Ok(FaidxJob::augment_args(c)),
        "snp_pileup" => return Ok(SnpPileupJob::augment_args(c)),
        "index" => return Ok(IndexJob::augment_args(c)),
        "bgzip" => return Ok(BgzipJob::augment_args(c)),
        // A dataset has no @PG line: no --no-PG (the import's groups record the command line).
        "agd_import" => return Ok(AgdImportJob::augment_args(c)),
        "agd_export" => return Ok(AgdExportJob::augment_args(c)),
        _ => return default_spec(kind).map(|_| c),
    };
    Ok(NoPg::augment_args(c))
}

/// The keywords of job `kind`, in the order of its `--help`: one per flag that sets a keyword of
/// [`keywords`]; the spec fields no flag sets (view's masks, ...) and those of hidden flags (for
/// tests) are not Python keywords.
pub fn schema(kind: &str) -> Result<Vec<Keyword>> {
    let defaults = keywords(kind)?;
    let mut out = Vec::new();
    for arg in command(kind)?.get_arguments().filter(|a| !a.is_hide_set()) {
        let id = arg.get_id().as_str();
        // A flag's id is its field's name, or the keyword where the two differ (`output_fmt` for
        // the output's `format`).
        let Some(name) = [keyword_of(kind, id), id]
            .into_iter()
            .find(|k| defaults.contains_key(*k))
        else {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("{kind}: the flag {id:?} sets no keyword of the spec"),
            ));
        };
        let default = defaults[name].clone();
        out.push(Keyword {
            name: name.to_string(),
            annotation: annotation(arg, &default),
            default,
            flag: flag_name(arg),
            help: arg.get_help().map(|h| h.to_string()).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// `-l, --level` as `--help` spells a flag.
fn flag_name(arg: &clap::Arg) -> String {
    let short = arg.get_short().map(|c| format!("-{c}"));
    let long = arg.get_long().map(|l| format!("--{l}"));
    [short, long]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Python annotation of a flag's keyword: its value's type (from the flag's parser), a
/// sequence where the flag repeats, `Optional` where the spec's default is none.
fn annotation(arg: &clap::Arg, default: &Value) -> String {
    use clap::ArgAction;
    use std::any::TypeId;
    if matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        return "bool".into();
    }
    let t = arg.get_value_parser().type_id();
    let ints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ];
    let base = if t == TypeId::of::<std::path::PathBuf>() {
        "PathLike"
    } else if ints.iter().any(|i| t == *i) {
        "int"
    } else if t == TypeId::of::<f64>() || t == TypeId::of::<f32>() {
        "float"
    } else {
        "str"
    };
    let many = matches!(arg.get_action(), ArgAction::Append) || default.is_array();
    match (many, default.is_null() || default.is_array()) {
        (true, _) => format!("Optional[Sequence[{base}]]"),
        (false, true) => format!("Optional[{base}]"),
        (false, false) => base.to_string(),
    }
}
