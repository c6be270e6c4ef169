module @tp {
  func.func public @main(%v0: tensor<4xi32>, %v1: tensor<3xi64>, %v2: tensor<3xi32>) -> (tensor<4xi32>) {
    %v3 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v4 = "stablehlo.broadcast_in_dim"(%v3) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v5 = "stablehlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %v6 = "stablehlo.compare"(%v1, %v4) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %v7 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v8 = "stablehlo.broadcast_in_dim"(%v7) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v9 = "stablehlo.compare"(%v1, %v8) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %v10 = "stablehlo.or"(%v9, %v6) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
    %v11 = "stablehlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %v12 = "stablehlo.reduce"(%v10, %v11) ({
      ^bb0(%v13: tensor<i1>, %v14: tensor<i1>):
        %v15 = "stablehlo.or"(%v13, %v14) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v15) : (tensor<i1>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<3xi1>, tensor<i1>) -> tensor<i1>
    %v16 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v17 = "stablehlo.select"(%v12, %v5, %v16) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %v18 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v19 = "stablehlo.broadcast_in_dim"(%v18) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v20 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v21 = "stablehlo.broadcast_in_dim"(%v20) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v22 = "stablehlo.multiply"(%v1, %v21) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v23 = "stablehlo.add"(%v19, %v22) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v24 = "stablehlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %v25 = "stablehlo.broadcast_in_dim"(%v24) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<4xi1>
    %v26 = "stablehlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    %v27 = "stablehlo.broadcast_in_dim"(%v26) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<3xi1>
    %v28 = "stablehlo.scatter"(%v25, %v23, %v27) ({
      ^bb0(%v29: tensor<i1>, %v30: tensor<i1>):
        %v31 = "stablehlo.or"(%v29, %v30) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v31) : (tensor<i1>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi1>, tensor<3xi64>, tensor<3xi1>) -> tensor<4xi1>
    %v32 = "stablehlo.constant"() {value = dense<-2147483648> : tensor<i32>} : () -> tensor<i32>
    %v33 = "stablehlo.broadcast_in_dim"(%v32) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<4xi32>
    %v34 = "stablehlo.select"(%v28, %v33, %v0) : (tensor<4xi1>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %v35 = "stablehlo.scatter"(%v34, %v23, %v2) ({
      ^bb0(%v36: tensor<i32>, %v37: tensor<i32>):
        %v38 = "stablehlo.maximum"(%v36, %v37) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%v38) : (tensor<i32>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi32>, tensor<3xi64>, tensor<3xi32>) -> tensor<4xi32>
    "func.return"(%v35) : (tensor<4xi32>) -> ()
  }
}
