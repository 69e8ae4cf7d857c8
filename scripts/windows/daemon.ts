/** The daemon's command line, as the Windows lane bundles it for Windows node.exe. */
import { main } from '../../service/src/cli.ts';

await main(process.argv.slice(2));
