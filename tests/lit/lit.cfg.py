# lit configuration for burstc's golden tests: every .burst, .ir and .test file
# under tests/lit is a test whose RUN lines drive burstc and FileCheck.
import os
import lit.formats

config.name = "burstc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".burst", ".ir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.burstc_bin_dir, "tests", "lit-out")

config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%burstc", config.burstc))
config.substitutions.append(("%examples", os.path.join(config.source_root, "examples")))
config.substitutions.append(("%shared", os.path.join(os.path.dirname(config.source_root), "shared")))
