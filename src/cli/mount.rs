use clap::Args;

#[derive(Args, Debug)]
pub struct MountArgs {
    pub data_dir: std::path::PathBuf,
    pub mountpoint: std::path::PathBuf,
}

pub fn run(_args: MountArgs) -> i32 {
    eprintln!("not yet implemented");
    2
}
