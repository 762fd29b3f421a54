//! `nodewright validate -f FILE|DIR|-`: every document checked with upstream's rules; older
//! generations are converted first (all inputs together, as `convert` does) and the v1 result
//! is checked. Exit 0 when all are valid, 1 otherwise, or when there was no Karpenter object.

use std::path::PathBuf;
use std::process::ExitCode;

use nodewright_api::convert::{ConvertOptions, Outcome, convert_documents};
use nodewright_api::document::{self, ReadError};

#[derive(clap::Args)]
pub struct Args {
    /// A YAML or JSON file (several documents allowed), a directory, or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// The instance profile v1alpha1 AWSNodeTemplates without one used (the old global
    /// `aws.defaultInstanceProfile` setting).
    #[arg(long)]
    pub default_instance_profile: Option<String>,
    /// Do not print warnings (unknown fields, conversion notes, skipped documents).
    #[arg(short, long)]
    pub quiet: bool,
    /// Treat fields the API server would drop (unknown fields) as errors, like
    /// `kubectl apply --validate=strict`.
    #[arg(long)]
    pub strict: bool,
}

/// Reads every input; a file that is not YAML/JSON is reported and counts as invalid.
pub fn read_all(files: &[PathBuf]) -> anyhow::Result<(Vec<document::Document>, bool)> {
    let mut docs = Vec::new();
    let mut ok = true;
    for f in files {
        match document::read_documents(f) {
            Ok(d) => docs.extend(d),
            Err(
                e @ (ReadError::Parse { .. } | ReadError::Utf8 { .. } | ReadError::TooLarge { .. }),
            ) => {
                crate::output::emit_line(&e.to_string())?;
                ok = false;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((docs, ok))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (docs, mut ok) = read_all(&args.files)?;
    let options = ConvertOptions {
        default_instance_profile: args.default_instance_profile,
    };
    let (mut checked, mut invalid) = (0usize, 0usize);
    for item in convert_documents(docs, &options) {
        let what = item.doc.describe();
        let (prefix, warnings): (String, &[String]) = match &item.outcome {
            Outcome::NotKarpenter => {
                if !args.quiet {
                    eprintln!(
                        "note: {what}: skipped, {:?} is not a Karpenter API version",
                        item.doc.api_version()
                    );
                }
                continue;
            }
            Outcome::Failed(e) => {
                checked += 1;
                invalid += 1;
                crate::output::emit_line(&format!("{what}: {e}"))?;
                continue;
            }
            Outcome::Current(_) => (what.clone(), &[]),
            Outcome::Converted { object, warnings } => (
                format!("{what} (as {} {})", object.api_version(), object.kind()),
                warnings,
            ),
        };
        checked += 1;
        let Some(mut report) = item.validate() else {
            continue;
        };
        if args.strict {
            let (unknown, rest): (Vec<_>, Vec<_>) = report
                .warnings
                .into_iter()
                .partition(|w| w.reason.starts_with("unknown field"));
            report.warnings = rest;
            report.errors.extend(unknown);
        }
        if !args.quiet {
            for w in warnings {
                eprintln!("warning: {what}: {w}");
            }
            for w in &report.warnings {
                eprintln!("warning: {prefix}: {w}");
            }
        }
        if !report.errors.is_empty() {
            invalid += 1;
            for e in &report.errors {
                crate::output::emit_line(&format!("{prefix}: {e}"))?;
            }
        }
    }
    if invalid > 0 {
        ok = false;
    }
    if checked == 0 {
        // Nothing was checked: a typo in every apiVersion or the wrong file must not pass.
        // (An unreadable input already said why.)
        if ok {
            eprintln!("error: no Karpenter objects in the input");
        }
        return Ok(ExitCode::from(1));
    }
    if !args.quiet {
        eprintln!("{} of {checked} Karpenter objects valid", checked - invalid);
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
