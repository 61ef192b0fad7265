"""Coverage-guided fuzzing of the decoders (atheris): ``make fuzz``; see :mod:`tests.fuzz.targets`."""
