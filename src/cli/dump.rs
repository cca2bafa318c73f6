use clap::Args;

#[derive(Args, Debug)]
pub struct DumpArgs {
    pub files: Vec<std::path::PathBuf>,
}

pub fn run(_args: DumpArgs) -> i32 {
    eprintln!("not yet implemented");
    2
}
