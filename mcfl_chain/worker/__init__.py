"""One sovereign trainer: follows the contracts' events and plays MCFL rounds."""
