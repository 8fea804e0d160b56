/** Placeholder until this sub-command lands; it says so instead of pretending to work. */
export async function main(_argv: string[]): Promise<number> {
  process.stderr.write("kvrouter: this command is not implemented yet\n");
  return 1;
}
