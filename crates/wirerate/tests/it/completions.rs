//! Shell completions and the manual page come from the parser's own definitions.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{run, stderr};

const LIMIT: Duration = Duration::from_secs(20);

fn stdout_of(args: &[&str]) -> String {
    let out = run(args, LIMIT);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completion_knows_the_subcommands_and_options_and_is_valid_bash() {
    let script = stdout_of(&["completions", "bash"]);
    for word in ["run", "report", "compare", "--json", "--svg", "--find-max"] {
        assert!(script.contains(word), "{word}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wirerate.bash");
    std::fs::write(&path, &script).unwrap();
    let check = Command::new("bash")
        .arg("-n")
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn zsh_and_fish_completions() {
    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef wirerate"));
    assert!(zsh.contains("--json"));
    let fish = stdout_of(&["completions", "fish"]);
    assert!(fish.contains("complete -c wirerate"));
    assert!(fish.contains("report"));
    let out = run(&["completions", "powershell-or-so"], LIMIT);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_has_every_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH WIRERATE 1"), "{:.200}", page);
    for sub in ["RUN", "SERVE", "COMPARE", "REPORT", "COMPLETIONS"] {
        assert!(page.contains(&format!(".SH \"WIRERATE {sub}\"")), "{sub}");
    }
    // an option of a subcommand, with its help
    assert!(page.contains("\\-\\-svg"));
}

/// What bash completes for the words of a command line whose last word is being typed.
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wirerate.bash");
    std::fs::write(&path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         _wirerate_iperf3 wirerate '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        path.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(driver)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_run_options_after_iperf3_spellings() {
    let script = stdout_of(&["completions", "bash"]);
    for words in [
        &["wirerate", "-c", "HOST", "--bi"][..],
        &["wirerate", "-p", "5201", "-c", "HOST", "--bi"][..],
        &["wirerate", "run", "HOST", "--bi"][..],
    ] {
        let got = bash_completes(&script, words);
        assert!(got.iter().any(|w| w == "--bidir"), "{words:?}: {got:?}");
    }
    let got = bash_completes(&script, &["wirerate", "-s", "--users-"]);
    assert!(got.iter().all(|w| !w.starts_with("--bidir")), "{got:?}");
}

#[test]
fn the_man_page_refers_to_no_other_page_and_has_exit_status_and_examples() {
    let page = stdout_of(&["man"]);
    assert!(
        !page.contains("wirerate\\-run(1)"),
        "a page that is never installed"
    );
    for section in [
        ".SH SUBCOMMANDS",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
        ".SH FILES",
    ] {
        assert!(page.contains(section), "{section}");
    }
    assert!(page.contains("\\fB130\\fR"), "the interrupted exit status");
}
