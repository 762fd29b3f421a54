//! `nodewright convert -f OLD.yaml`: prints every object as v1 (documents that are not
//! Karpenter objects pass through unchanged); warnings go to stderr. Exit 1 when a document
//! cannot be read or its v1 form does not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use nodewright_api::convert::{Outcome, convert_documents};

use super::validate::read_all;

#[derive(clap::Args)]
pub struct Args {
    /// A YAML or JSON file (several documents allowed), a directory, or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (docs, mut ok) = read_all(&args.files)?;
    let mut out = String::new();
    for item in convert_documents(docs) {
        let what = item.doc.describe();
        let value = match &item.outcome {
            Outcome::NotKarpenter => item.doc.value.clone(),
            Outcome::Failed(e) => {
                eprintln!("error: {what}: {e}");
                ok = false;
                continue;
            }
            Outcome::Current(o) => o.to_value(),
            Outcome::Converted { object, warnings } => {
                for w in warnings {
                    eprintln!("warning: {what}: {w}");
                }
                object.to_value()
            }
        };
        if let Some(o) = item.object() {
            for e in o.validate().errors {
                eprintln!("error: {what} (as {} {}): {e}", o.api_version(), o.kind());
                ok = false;
            }
        }
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&value)?);
    }
    print!("{out}");
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
