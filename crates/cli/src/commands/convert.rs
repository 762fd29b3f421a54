//! `nodewright convert -f OLD.yaml`: prints every object as v1 (documents that are not
//! Karpenter objects pass through unchanged); warnings go to stderr. Exit 1 when a document
//! cannot be read or its v1 form does not validate.

use std::path::PathBuf;
use std::process::ExitCode;

use nodewright_api::convert::v1alpha5::legacy_selector_paths;
use nodewright_api::convert::{ConvertOptions, Outcome, convert_documents};

use super::validate::read_all;

#[derive(clap::Args)]
pub struct Args {
    /// A YAML or JSON file (several documents allowed), a directory, or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// The instance profile v1alpha1 AWSNodeTemplates without one used (the old global
    /// `aws.defaultInstanceProfile` setting).
    #[arg(long)]
    pub default_instance_profile: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (docs, mut ok) = read_all(&args.files)?;
    let options = ConvertOptions {
        default_instance_profile: args.default_instance_profile,
    };
    let mut out = String::new();
    for item in convert_documents(docs, &options) {
        let what = item.doc.describe();
        let value = match &item.outcome {
            Outcome::NotKarpenter => {
                for path in legacy_selector_paths(&item.doc.value) {
                    eprintln!(
                        "warning: {what}: {path} selects karpenter.sh/provisioner-name; nodes of NodePools converted from a Provisioner still carry it, but nodes of NodePools written for v1 carry only karpenter.sh/nodepool"
                    );
                }
                item.doc.value.clone()
            }
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
        if let (Some(o), Some(report)) = (item.object(), item.validate()) {
            for w in report.warnings {
                eprintln!("warning: {what} (as {} {}): {w}", o.api_version(), o.kind());
            }
            for e in report.errors {
                eprintln!("error: {what} (as {} {}): {e}", o.api_version(), o.kind());
                ok = false;
            }
        }
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&value)?);
    }
    crate::output::emit(&out)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
