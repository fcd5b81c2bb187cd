/**
 * Every resource kind's driver, loaded on first use: a bundle of files never loads the code that
 * talks to docker, systemd or apt (start-up time is most of a no-op apply).
 */
import type { AnyDriver } from "../driver.js";

const LOADERS: Readonly<Record<string, () => Promise<AnyDriver>>> = {
  file: async () => (await import("./file.js")).fileDriver,
  directory: async () => (await import("./directory.js")).directoryDriver,
  symlink: async () => (await import("./symlink.js")).symlinkDriver,
  command: async () => (await import("./command.js")).commandDriver,
  service: async () => (await import("./service.js")).serviceDriver,
  "systemd-unit": async () => (await import("./systemd-unit.js")).systemdUnitDriver,
  container: async () => (await import("./container.js")).containerDriver,
  package: async () => (await import("./package.js")).packageDriver,
};

/** The resource kinds this agent has a driver for. */
export const DRIVER_KINDS: readonly string[] = Object.keys(LOADERS);

const loaded = new Map<string, Promise<AnyDriver>>();

/** The driver of a resource kind. */
export function driverOf(kind: string): Promise<AnyDriver> {
  let driver = loaded.get(kind);
  if (!driver) {
    const load = LOADERS[kind];
    if (!load) return Promise.reject(new Error(`no driver for resource kind ${JSON.stringify(kind)}`));
    driver = load();
    loaded.set(kind, driver);
  }
  return driver;
}
