//! `nodewright validate -f FILE|DIR|-`: every document checked with upstream's rules; older
//! generations are converted first and the v1 result is checked. Exit 0 when all are valid.

use std::path::PathBuf;
use std::process::ExitCode;

use nodewright_api::convert::{Outcome, convert_documents};
use nodewright_api::document::{self, ReadError};
use nodewright_api::object::Object;

#[derive(clap::Args)]
pub struct Args {
    /// A YAML or JSON file (several documents allowed), a directory, or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Do not print warnings (unknown fields, conversion notes, skipped documents).
    #[arg(short, long)]
    pub quiet: bool,
}

/// Reads every input; a file that is not YAML/JSON is reported and counts as invalid.
pub fn read_all(files: &[PathBuf]) -> anyhow::Result<(Vec<document::Document>, bool)> {
    let mut docs = Vec::new();
    let mut ok = true;
    for f in files {
        match document::read_documents(f) {
            Ok(d) => docs.extend(d),
            Err(e @ ReadError::Parse { .. }) => {
                println!("{e}");
                ok = false;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((docs, ok))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (docs, mut ok) = read_all(&args.files)?;
    let (mut checked, mut invalid) = (0usize, 0usize);
    for item in convert_documents(docs) {
        let what = item.doc.describe();
        let (object, converted, warnings): (&Object, bool, &[String]) = match &item.outcome {
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
                println!("{what}: {e}");
                continue;
            }
            Outcome::Current(o) => (o, false, &[]),
            Outcome::Converted { object, warnings } => (object, true, warnings),
        };
        checked += 1;
        let prefix = if converted {
            format!("{what} (as {} {})", object.api_version(), object.kind())
        } else {
            what.clone()
        };
        let report = if converted {
            object.validate()
        } else {
            nodewright_api::object::validate_value(&item.doc.value)
                .unwrap_or_else(|| object.validate())
        };
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
                println!("{prefix}: {e}");
            }
        }
    }
    if invalid > 0 {
        ok = false;
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
