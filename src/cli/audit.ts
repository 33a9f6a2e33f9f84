// `teamlog audit …`: the audit log's evidence, from the command line (docs/api.md section 7).
import type { CommandGroup } from './support.js';
import { auditExport } from './audit-export.js';
import { auditRedact } from './audit-redact.js';
import { auditVerify } from './audit-verify.js';
import { auditVerifyProof } from './audit-verify-proof.js';

export const auditCommand: CommandGroup = {
  subcommands: { verify: auditVerify, 'verify-proof': auditVerifyProof, export: auditExport, redact: auditRedact },
};
