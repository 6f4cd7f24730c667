"""Reading the bare repository mirrors (`/work/.mirror/<owner+name>/repo`) the localization benches
use: one `git` call, and a commit's time (cached)."""
import functools, subprocess


def git(gitdir, *args, **kw):
    """`git --git-dir GITDIR ARGS…`'s stdout (bytes); raises on a non-zero exit."""
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, **kw).stdout


@functools.cache
def commit_time(gitdir, commit):
    """Committer time of `commit` (seconds since the epoch)."""
    return int(git(gitdir, "show", "-s", "--format=%ct", commit))
