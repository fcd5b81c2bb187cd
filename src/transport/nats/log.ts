/** The logging the NATS transport needs; a pino logger fits as it is. */
export interface NatsLog {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Logs nothing (the default; the CLI passes its pino logger). */
export const silentLog: NatsLog = { debug() {}, info() {}, warn() {}, error() {} };
