//! `nodewright crds`: the CustomResourceDefinitions as one YAML stream, or one file per CRD
//! with `--output-dir` (how `charts/nodewright/crds/` and `charts/nodewright-crd/templates/`
//! are generated).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nodewright_api::crd;

#[derive(clap::Args)]
pub struct Args {
    /// Write one file per CRD into this directory instead of printing.
    #[arg(long)]
    pub output_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.output_dir {
        None => crate::output::emit(&crd::all_yaml())?,
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (name, value) in crd::all() {
                let path = dir.join(name);
                std::fs::write(&path, crd::to_yaml(&value))
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
