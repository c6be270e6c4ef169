module @tp {
  func.func public @main(%v0: tensor<2x3xf16>) -> (tensor<f16>) {
    %v1 = "stablehlo.convert"(%v0) : (tensor<2x3xf16>) -> tensor<2x3xf32>
    %v2 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v3 = "stablehlo.reshape"(%v1) : (tensor<2x3xf32>) -> tensor<6xf32>
    %v4 = "stablehlo.reduce"(%v3, %v2) ({
      ^bb0(%v5: tensor<f32>, %v6: tensor<f32>):
        %v7 = "stablehlo.add"(%v5, %v6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%v7) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
    %v8 = "stablehlo.convert"(%v4) : (tensor<f32>) -> tensor<f16>
    "func.return"(%v8) : (tensor<f16>) -> ()
  }
}
