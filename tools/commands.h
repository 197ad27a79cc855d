/* Subcommands of the `vlmc` driver; each lives in tools/cmd_<name>.c, parses its own flags
 * (flags live only in the tools, never in the libraries) and returns the process exit code. */
#ifndef VLMC_TOOLS_COMMANDS_H
#define VLMC_TOOLS_COMMANDS_H

int vlmc_cmd_opt(int argc, char **argv);
int vlmc_cmd_tokenize(int argc, char **argv);
int vlmc_cmd_preprocess(int argc, char **argv);
int vlmc_cmd_diff_taps(int argc, char **argv);
int vlmc_cmd_compile(int argc, char **argv);
int vlmc_cmd_inspect(int argc, char **argv);
int vlmc_cmd_random_checkpoint(int argc, char **argv);
int vlmc_cmd_kernel_test(int argc, char **argv);
int vlmc_cmd_reseal(int argc, char **argv);

#endif
