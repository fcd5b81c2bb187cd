/** Every resource kind's driver, by kind. */
import type { AnyDriver } from "../driver.js";
import { commandDriver } from "./command.js";
import { containerDriver } from "./container.js";
import { directoryDriver } from "./directory.js";
import { fileDriver } from "./file.js";
import { packageDriver } from "./package.js";
import { serviceDriver } from "./service.js";
import { symlinkDriver } from "./symlink.js";
import { systemdUnitDriver } from "./systemd-unit.js";

export const DRIVERS: Readonly<Record<string, AnyDriver>> = {
  file: fileDriver,
  directory: directoryDriver,
  symlink: symlinkDriver,
  command: commandDriver,
  service: serviceDriver,
  "systemd-unit": systemdUnitDriver,
  container: containerDriver,
  package: packageDriver,
};
